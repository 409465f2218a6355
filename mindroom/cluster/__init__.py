"""Several ``mindroom run`` processes on one database: leases, the shared inbox, hand-overs."""
