from django.urls import path

from api import account

urlpatterns = [
    path("", account.token_list, name="api-tokens"),
    path("<int:pk>/revoke/", account.token_revoke, name="api-token-revoke"),
]
