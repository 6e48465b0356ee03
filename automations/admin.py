from django.contrib import admin

from automations.models import Automation, AutomationRun


@admin.register(Automation)
class AutomationAdmin(admin.ModelAdmin):
    list_display = ["name", "repository", "cron", "creator", "paused", "consecutive_failures"]
    list_filter = ["paused", "repository"]


@admin.register(AutomationRun)
class AutomationRunAdmin(admin.ModelAdmin):
    list_display = ["automation", "period", "state", "session", "created_at"]
    list_filter = ["state"]
