"""Files every component writes or reads the same way: atomic writes (`atomic`) and pid files
with their identity check (`pidfile`). A package of its own because the exporter's and the model
server's images carry only their component and this, not the stack."""
