"""glueinfo's built-in GLUE 1.3 templates (installed as package data of glueinfo.ldif_templates)."""
