// A refused SSO sign-in or step-up: a console page waiting on a step-up window resumes
// (its retry then shows the refusal) — the window stays open so the person can read why.
const channel = new BroadcastChannel("hal-sso-reauth");
channel.postMessage("refused");
channel.close();
