"""The data every layer shares: the stored record, its review tally, audit trail, audience,
the ids carried through Slack and the parsed click. Imports only the seam and ``blockkit``."""
