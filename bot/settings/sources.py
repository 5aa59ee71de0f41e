"""Where settings come from: the environment, then a ``.env`` file (read literally), only the
bot's own variable names; a variable set but empty in the environment still wins."""

from __future__ import annotations

import io
import re
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Final

from dotenv.parser import parse_stream
from pydantic_settings import DotEnvSettingsSource, EnvSettingsSource

if TYPE_CHECKING:
    from pydantic_settings import BaseSettings

__all__ = ["DotEnvFile", "Environment"]

_KEY: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_OUR_PREFIXES: Final = ("SLACK_", "REDIS_", "BOT_", "DSH_", "SANDBOX_", "LOG_", "QUESTION_")


class Environment(EnvSettingsSource):
    """The process environment (or any mapping), limited to ``names``."""

    def __init__(
        self, settings_cls: type[BaseSettings], environ: Mapping[str, str], names: Collection[str]
    ) -> None:
        self._environ = environ
        self._names = names
        super().__init__(settings_cls, case_sensitive=False)

    def _load_env_vars(self) -> Mapping[str, str | None]:
        return {name.lower(): self._environ[name] for name in self._names if name in self._environ}


class DotEnvFile(DotEnvSettingsSource):
    """``KEY=VALUE`` lines of one file; ``problems`` and ``notes`` say what was wrong with it."""

    def __init__(
        self, settings_cls: type[BaseSettings], path: Path | None, names: Collection[str]
    ) -> None:
        self.problems: list[str] = []
        self.notes: list[str] = []
        self._path = path
        self._names = names
        super().__init__(settings_cls, env_file=path, case_sensitive=False)

    def _read_env_files(self) -> Mapping[str, str | None]:
        if self._path is None:
            return {}
        try:
            text = self._path.read_text(encoding="utf-8-sig")
        except FileNotFoundError:
            return {}
        except (OSError, UnicodeDecodeError) as exc:
            self.problems.append(f"{self._path}: cannot be read ({type(exc).__name__}).")
            return {}
        values = self._parse(text)
        self.notes += [
            f"{self._path} sets {key}, which is not a setting of the bot (a typo?)"
            for key in sorted(values)
            if key not in self._names and key.startswith(_OUR_PREFIXES)
        ]
        return {key.lower(): value for key, value in values.items() if key in self._names}

    def _parse(self, text: str) -> dict[str, str]:
        """The file's bindings, later lines winning; each unreadable line is a problem."""
        values: dict[str, str] = {}
        for binding in parse_stream(io.StringIO(text)):
            # The parser counts from where the binding's text starts, blank lines included.
            text_of = binding.original.string
            blank = text_of[: len(text_of) - len(text_of.lstrip())]
            line = binding.original.line + blank.count("\n")
            where = f"{self._path} line {line}"
            if binding.error:
                self.problems.append(
                    f"{where}: cannot be read as KEY=VALUE (a quote left open, or text after "
                    "the closing quote?)."
                )
            elif binding.key is None:
                continue  # a comment or a blank line
            elif binding.value is None or not _KEY.fullmatch(binding.key):
                self.problems.append(f"{where}: expected KEY=VALUE.")
            else:
                values[binding.key] = binding.value
        return values
