# The project package is an app for its templates and commands; models live in the apps named
# for what users see (accounts, snapshots, sessions, approvals).
