"""Pure rendering: Block Kit messages, modals and approvals, the words a person reads, safe
mrkdwn. Imports ``model``, ``blockkit`` and the seam; no I/O."""
