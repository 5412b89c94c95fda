"""Install or upgrade HAL on the ops host from a release artifact, with automatic rollback.

    python3 install.py --artifact-url https://…/hal-<v>.tar.gz --sha256 <hex>   (or --artifact PATH)
               [--root /srv/hal] [--env-file /etc/hal/hal.env] [--user hal]
               [--health-url https://hal.example.org/api/health]
               [--restart-cmd "systemctl restart hal-web hal-worker"] [--keep 5]
               [--allow-untested] [--allow-downgrade]

Order: verify the sha256 → refuse an artifact whose suite did not run (`release.py build
--skip-tests`, or no build record) and a version older than `current` → back up (the
current release's `manage.py dr_snapshot`) → stage `<root>/releases/<v>` (unpack, venv
with the dependencies, migrate, collectstatic, `check --deploy` with the env file loaded)
→ switch `<root>/current` atomically → restart → read back /api/health until it reports
<v>. A failure after the switch switches back to the previous release and restarts again.
Data, config, vault key file and earlier releases are never touched; the oldest releases
beyond --keep are removed.

Standard library only: it runs with the host's python3 before any virtualenv exists.
`deploy/install.py` is the entry point; the modules here hold the seams: `inputs` (URLs,
env file, sha256, download), `artifact` (version, build record, installability, unpack),
`releases` (the `current` link, pruning, the lock), `service` (manage.py as the service
user, restarts), `health` (the read-back), `procedure` (the order above, rollback) and
`cli` (the command line).
"""
