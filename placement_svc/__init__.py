"""placement-svc: the OpenStack Placement API, reimplemented."""
