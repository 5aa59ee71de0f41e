"""Upload a long text as one file in a thread: Slack's external upload flow."""

from __future__ import annotations

import io

import aiohttp
from slack_sdk.web.async_client import AsyncWebClient

from adapters.slack.render.blocks import Attachment

__all__ = ["upload_text"]

_UPLOAD_TIMEOUT = aiohttp.ClientTimeout(total=120.0)


async def upload_text(
    client: AsyncWebClient, attachment: Attachment, *, channel: str, thread_ts: str
) -> str:
    """Share ``attachment`` as a file in ``channel``'s thread ``thread_ts``; its file id."""
    data = attachment.content.encode("utf-8")
    reserved = await client.files_getUploadURLExternal(
        filename=attachment.filename, length=len(data)
    )
    url, file_id = str(reserved["upload_url"]), str(reserved["file_id"])
    session = client.session
    owned = session is None
    if session is None:
        session = aiohttp.ClientSession()
    try:
        async with session.post(url, data=io.BytesIO(data), timeout=_UPLOAD_TIMEOUT) as response:
            if response.status != 200:
                body = (await response.text())[:200]
                raise aiohttp.ClientResponseError(
                    response.request_info, (), status=response.status, message=body
                )
    finally:
        if owned:
            await session.close()
    await client.files_completeUploadExternal(
        files=[{"id": file_id, "title": attachment.title}],
        channel_id=channel,
        thread_ts=thread_ts,
        initial_comment=attachment.comment,
    )
    return file_id
