from django.contrib import admin

from integrations.models import SlackChannelRoute, SlackKeywordRule, SlackThread, SlackUser

admin.site.register([SlackChannelRoute, SlackKeywordRule, SlackUser, SlackThread])
