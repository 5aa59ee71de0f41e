"""One question's life in Slack: post, wait, keep deadlines, end, keep its message in step.
Imports ``stores``, ``render``, ``model``, ``pacing`` and the seam."""
