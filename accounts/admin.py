from django.contrib import admin

from accounts.models import Membership


class MembershipInline(admin.TabularInline):
    """A repository's members and their roles, edited on the repository's admin page
    (snapshots/admin.py)."""

    model = Membership
    extra = 1
