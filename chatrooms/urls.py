"""HTTP routes of the chat rooms and their API (SPEC §10)."""

from django.urls import path

from chatrooms import views, views_archive, views_export, views_files, views_share

app_name = "chatrooms"
urlpatterns = [
    path("api/ai/rooms", views.rooms, name="api_rooms"),
    path("api/ai/rooms/<int:room_id>", views.room, name="api_room"),
    path("api/ai/rooms/<int:room_id>/messages", views.room_messages, name="api_room_messages"),
    path("api/ai/rooms/<int:room_id>/reset", views.room_reset, name="api_room_reset"),
    path(
        "api/ai/rooms/<int:room_id>/turns/<int:turn_id>/retry",
        views.retry_turn,
        name="api_turn_retry",
    ),
    path(
        "api/ai/rooms/<int:room_id>/turns/<int:turn_id>/stop",
        views.turn_stop,
        name="api_turn_stop",
    ),
    path("api/ai/rooms/<int:room_id>/stop", views.room_stop, name="api_room_stop"),
    path(
        "api/ai/rooms/<int:room_id>/messages/<int:message_id>",
        views.edit_message,
        name="api_message_edit",
    ),
    path(
        "api/ai/rooms/<int:room_id>/messages/<int:message_id>/regenerate",
        views.regenerate,
        name="api_message_regenerate",
    ),
    path(
        "api/ai/rooms/<int:room_id>/messages/<int:message_id>/show",
        views.message_show,
        name="api_message_show",
    ),
    path(
        "api/ai/rooms/<int:room_id>/attachments",
        views_files.room_attachments,
        name="api_room_attachments",
    ),
    path("api/ai/attachments/<int:attachment_id>", views_files.attachment, name="api_attachment"),
    path("api/ai/rooms/<int:room_id>/export", views_export.room_export, name="api_room_export"),
    path(
        "api/ai/archives/<int:archive_id>/export",
        views_export.archive_export,
        name="api_archive_export",
    ),
    path("api/ai/shares", views_share.shares_api, name="api_shares"),
    path(
        "api/ai/shares/<int:share_id>/revoke",
        views_share.share_revoke_api,
        name="api_share_revoke",
    ),
    path("ai/shares/new", views_share.share_form, name="share_new"),
    path("ai/shares/<int:share_id>/revoke", views_share.revoke_form, name="share_revoke"),
    path("ai/shared/<str:token>", views_share.shared_page, name="shared"),
    path("api/ai/panel", views.panel, name="api_panel"),
    path("api/ai/archives", views_archive.archives_api, name="api_archives"),
    path("api/ai/archives/<int:archive_id>", views_archive.archive_api, name="api_archive"),
    path(
        "api/ai/archives/<int:archive_id>/restore",
        views_archive.archive_restore_api,
        name="api_archive_restore",
    ),
    path(
        "api/ai/archives/<int:archive_id>/continue",
        views_archive.archive_continue_api,
        name="api_archive_continue",
    ),
    path("api/ai/search", views_archive.search_api, name="api_search"),
    path("ai/archive/", views_archive.archive_page, name="archive"),
    path("ai/archive/<int:archive_id>", views_archive.archive_detail_page, name="archive_detail"),
    path(
        "ai/archive/<int:archive_id>/delete",
        views_archive.archive_delete_page,
        name="archive_delete",
    ),
    path(
        "ai/archive/<int:archive_id>/restore",
        views_archive.archive_restore_page,
        name="archive_restore",
    ),
    path(
        "ai/archive/<int:archive_id>/continue",
        views_archive.archive_continue_page,
        name="archive_continue",
    ),
    path(
        "ai/rooms/<int:room_id>/transcript",
        views_archive.transcript_page,
        name="room_transcript",
    ),
]
