from django.urls import path

from gateway import views

app_name = "repository-policy"
urlpatterns = [
    path("<str:repo>/models/", views.repository_models, name="models"),
]
