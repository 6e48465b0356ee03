from django.urls import path

from metrics import spend, views

# Included at metrics/ by the project's URLs; the names are global (no namespace), as before.
urlpatterns = [
    path("", views.metrics, name="metrics"),
    path("spend/", spend.spend, name="metrics-spend"),
    path("review-time/<int:pr_id>/", views.review_time, name="metrics-review-time"),
]
