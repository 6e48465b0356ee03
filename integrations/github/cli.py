"""`manage.py inspect github link|unlink …`: say which GitHub repository a repository is."""

from __future__ import annotations

from django.core.management.base import CommandError
from django.db import transaction

from integrations.github import app_settings
from integrations.github.codehost import repository_link_github
from integrations.github.installations import add_and_link
from integrations.github.models import GitHubLink
from sessions.codehosts import CodeHostError
from snapshots.models import Repository
from snapshots.repositories import RepositoryRefused


def register(areas, command) -> None:
    github = areas.add_parser("github", help="repositories on GitHub").add_subparsers(
        dest="action", metavar="ACTION", required=True
    )
    link = github.add_parser(
        "link",
        help="link a repository to OWNER/NAME on GitHub (added first when new)",
        description="Link a repository to OWNER/NAME on GitHub, where the GitHub App is "
        "installed; checks the App can read it. A new NAME is added with the GitHub URL, its "
        "default branch and every superuser as admin.",
    )
    link.set_defaults(handler=github_link)
    link.add_argument("name")
    link.add_argument("full_name", metavar="OWNER/NAME")
    link.add_argument("--url", help="clone URL (default GITHUB_WEB_URL/OWNER/NAME.git)")
    link.add_argument(
        "--branch", help="default branch of a new repository (default: GitHub's default branch)"
    )
    unlink = github.add_parser("unlink", help="make a repository a local one again")
    unlink.set_defaults(handler=github_unlink)
    unlink.add_argument("name")


def github_link(command, options) -> int:
    name, full_name = options["name"], options["full_name"]
    repository = Repository.objects.filter(name=name).first()
    created = repository is None
    if created:
        url = options["url"] or f"{app_settings.web_url()}/{full_name.strip('/')}.git"
        try:
            # The settings page's action: added with the default branch detected, and linked.
            repository = add_and_link(
                name=name, full_name=full_name, url=url, by=None, branch=options["branch"]
            )
        except RepositoryRefused as exc:
            raise CommandError(f"{exc}; {name} was not linked") from None
        link = repository.github
    else:
        with transaction.atomic():
            if options["url"]:
                repository.url = options["url"]
                repository.save(update_fields=["url"])
            try:
                link = repository_link_github(repository=repository, full_name=full_name)
            except CodeHostError as exc:
                transaction.set_rollback(True)
                raise CommandError(f"{exc}; {name} was not linked") from None
    verb = "added and linked" if created else "linked"
    command.stdout.write(
        f"{verb} {repository.name} to {link.full_name} on GitHub "
        f"(App installation {link.installation_id}, {repository.url}, branch "
        f"{repository.default_branch})"
    )
    return 0


def github_unlink(command, options) -> int:
    deleted, _ = GitHubLink.objects.filter(repository__name=options["name"]).delete()
    if not deleted:
        raise CommandError(f"{options['name']} is not linked to GitHub")
    command.stdout.write(f"{options['name']} is a local repository again")
    return 0
