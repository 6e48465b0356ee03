from django.urls import path

from gateway import views

app_name = "budgets"
urlpatterns = [
    path("", views.budget_list, name="list"),
    path("<int:pk>/", views.budget_edit, name="edit"),
    path("<int:pk>/delete/", views.budget_delete, name="delete"),
]
