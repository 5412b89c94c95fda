// The SSO step-up window's last page: close, so the console page that opened it resumes.
if (window.opener) window.close();
