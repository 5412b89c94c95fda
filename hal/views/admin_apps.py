"""The admin app config that installs HAL's admin site (hal.views.adminsite.HalAdminSite)."""

from django.contrib.admin.apps import AdminConfig


class HalAdminConfig(AdminConfig):
    """django.contrib.admin with HAL's site as the default `admin.site`."""

    default_site = "hal.views.adminsite.HalAdminSite"
