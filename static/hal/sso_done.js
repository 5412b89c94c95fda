// The SSO step-up window's last page: tell the console page that opened it to resume
// (same origin, whatever the opener policy did to the window handle), then close.
const channel = new BroadcastChannel("hal-sso-reauth");
channel.postMessage("done");
channel.close();
window.close();
