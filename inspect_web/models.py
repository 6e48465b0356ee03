# The project package is an app for its templates, commands and role groups; models live in the
# apps named for what users see (snapshots, sessions, approvals).
