-- Whether the server replicates through wsrep (Galera: MariaDB Galera
-- Cluster, Percona XtraDB Cluster). A server without wsrep has no such
-- variable and returns no row; SHOW runs on MySQL, MariaDB and TiDB alike.
SHOW VARIABLES LIKE 'wsrep\_on'
