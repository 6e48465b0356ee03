"""The settings area: a team set up in the browser (repositories, people, recipe, secrets,
controls, models, the GitHub App, sign-in). Each page calls the same actions as the CLI and the
API, in the layers below, and those actions audit every change."""
