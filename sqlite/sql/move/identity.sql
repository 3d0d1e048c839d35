-- identity: the file of the main database, which with the jobs table's
-- name says where the jobs are stored ('' for a temporary database).
SELECT file FROM pragma_database_list WHERE name = 'main'
