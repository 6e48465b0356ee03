from django.shortcuts import redirect
from django.urls import path

from settings_area import (
    controls,
    github,
    people,
    providers,
    recipe,
    repositories,
    repository_ci,
    repository_models,
    repository_review,
    secrets,
    sign_in,
)

app_name = "settings_area"

urlpatterns = [
    path("", lambda request: redirect("settings_area:repositories"), name="index"),
    *repositories.urlpatterns,
    *people.urlpatterns,
    *recipe.urlpatterns,
    *secrets.urlpatterns,
    *controls.urlpatterns,
    *repository_models.urlpatterns,
    *repository_ci.urlpatterns,
    *repository_review.urlpatterns,
    *providers.urlpatterns,
    *github.urlpatterns,
    *sign_in.urlpatterns,
]
