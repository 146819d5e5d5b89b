"""The publish layer: every document of an assembled site made once (documents.py), handed to
every output (outputs/: stdout, file, ldap, and the daemon's http).  See ARCHITECTURE.md."""
