from django.urls import path

from automations import views

app_name = "automations"
urlpatterns = [
    path("", views.automation_list, name="list"),
    path("<int:pk>/toggle/", views.automation_toggle, name="toggle"),
]
