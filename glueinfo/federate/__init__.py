"""The federation view (``glueinfo federate``): the documents sites push to a broker, kept per
site, written into an LDAP server in BDII's top-level layout and served as JSON."""
