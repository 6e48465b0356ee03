from django.urls import path, re_path

from sessions import review_views, views

app_name = "sessions"
urlpatterns = [
    path("", views.session_list, name="list"),
    path("new/", views.session_new, name="new"),
    path("prewarm/", views.session_prewarm, name="prewarm"),
    re_path(
        r"^attachments/(?P<folder>[0-9a-f]{32})/(?P<name>[^/]+)$",
        views.session_attachment,
        name="attachment",
    ),
    path("<int:pk>/", views.session_detail, name="detail"),
    path("<int:pk>/older/", views.session_older, name="older"),
    path("<int:pk>/prompts/", views.session_prompt, name="prompt"),
    path("<int:pk>/stop/", views.session_stop, name="stop"),
    path("<int:pk>/merge/", views.session_merge, name="merge"),
    path("<int:pk>/review-agent/", views.session_review_agent, name="review-agent"),
    path("<int:pk>/diff/file/", review_views.diff_file_context, name="diff-file"),
    path("<int:pk>/diff/viewed/", review_views.diff_file_viewed, name="diff-viewed"),
    path("<int:pk>/review/comments/", views.session_review_comment, name="review_comment"),
    path("<int:pk>/review/", views.session_review_submit, name="review_submit"),
    path("<int:pk>/ci-fixes/<int:fix>/queue/", views.session_ci_fix_queue, name="ci-fix-queue"),
]
