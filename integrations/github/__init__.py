"""GitHub: the App's code host (tokens, pushes, pull requests, merges), the webhooks that keep
a session's pull request current, the repository link and its command line.

The integrations app registers the code host and the mirror's fetch credentials at start-up
(`integrations.apps`), so sessions and snapshots use GitHub without importing it.
"""
