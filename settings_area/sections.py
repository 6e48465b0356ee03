"""The tabs of the settings area, in order: (url name, label). Site sections are for site
admins; repository sections take the repository's name."""

SITE_SECTIONS = [
    ("settings_area:repositories", "Repositories"),
    ("settings_area:providers", "Models"),
    ("settings_area:github", "GitHub"),
    ("settings_area:sign_in", "Sign-in"),
]

REPOSITORY_SECTIONS = [
    ("settings_area:repository", "General"),
    ("settings_area:people", "People"),
    ("settings_area:recipe", "Recipe"),
    ("settings_area:secrets", "Secrets"),
    ("settings_area:controls", "Approvals and egress"),
    ("settings_area:repository_models", "Models"),
    ("settings_area:repository_ci", "CI fixes"),
    ("settings_area:repository_review", "Review agent"),
]
