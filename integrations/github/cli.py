"""`manage.py inspect github link|unlink …`: say which GitHub repository a repository is."""

from __future__ import annotations

from django.core.management.base import CommandError
from django.db import transaction

from integrations.github import app_settings
from integrations.github.codehost import repository_link_github
from integrations.github.installations import add_and_link
from integrations.github.models import GitHubLink
from sessions.ci_fixes import POLICIES, ci_fix_policy_set
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
    ci_fix = github.add_parser(
        "ci-fix",
        help="what a failed CI check on a session's PR does (shown when no option is given)",
        description="What a failed CI check on the head commit of a session's pull request does "
        "in a repository: auto queues a fix turn (up to --attempts per PR), ask offers it on the "
        "session page, off only records the result.",
    )
    ci_fix.set_defaults(handler=github_ci_fix)
    ci_fix.add_argument("name")
    ci_fix.add_argument("--policy", choices=POLICIES)
    ci_fix.add_argument("--attempts", type=int, help="fix turns per pull request (default 2)")
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


def github_ci_fix(command, options) -> int:
    repository = Repository.objects.filter(name=options["name"]).first()
    if repository is None:
        raise CommandError(f"no repository named {options['name']!r}")
    if options["policy"] is not None or options["attempts"] is not None:
        try:
            ci_fix_policy_set(repository=repository, policy=options["policy"],
                              attempts=options["attempts"])  # fmt: skip
        except ValueError as exc:
            raise CommandError(str(exc)) from None
    command.stdout.write(
        f"{repository.name}: CI fixes {repository.ci_fix_policy}, at most "
        f"{repository.ci_fix_attempts} fix turns per pull request"
    )
    return 0


def github_unlink(command, options) -> int:
    deleted, _ = GitHubLink.objects.filter(repository__name=options["name"]).delete()
    if not deleted:
        raise CommandError(f"{options['name']} is not linked to GitHub")
    command.stdout.write(f"{options['name']} is a local repository again")
    return 0
