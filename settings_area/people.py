"""Settings pages: people (see settings_area/sections.py)."""

from django.urls import URLPattern

urlpatterns: list[URLPattern] = []
