from django.contrib import admin

from integrations.github import admin as github_admin  # noqa: F401 - registers GitHub's rows
from integrations.models import SlackChannelRoute, SlackKeywordRule, SlackThread, SlackUser

admin.site.register([SlackChannelRoute, SlackKeywordRule, SlackUser, SlackThread])
