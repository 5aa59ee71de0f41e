"""A pending record as Block Kit: the open message, its modals, its final form, and the
thread and files of what does not fit (pure)."""
