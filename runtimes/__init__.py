"""Distributed runtime plugins shipped with tacc_hub (entry-point group ``tacc_hub.runtimes``)."""
