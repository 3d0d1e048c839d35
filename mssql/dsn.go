package mssql

import (
	"fmt"
	"strings"

	"github.com/dbqueue/dbq/dialect"
	"github.com/microsoft/go-mssqldb/msdsn"
)

// parseDSN reads a SQL Server DSN, once, in the forms go-mssqldb takes: a
// sqlserver:// URL, an ADO connection string (server=h;user id=u;
// password=p;database=d — it must name the server, as server, data source,
// address, addr or network address) or the odbc: form. Another string, a
// DSN of another database among them, is dialect.ErrUnknownScheme. It
// also returns the DSN as dialect.NewDSN reads it, to build messages
// from; a URL whose password is not URL-escaped is refused there. The
// error never holds the password: go-mssqldb's text is shown only cleaned
// of it (dialect.DSN.Scrub).
func parseDSN(dsn string) (msdsn.Config, *dialect.DSN, error) {
	ds, err := dialect.NewDSN(dsn)
	if err != nil {
		return msdsn.Config{}, nil, err
	}
	if ds.Dialect != dialect.MSSQL {
		return msdsn.Config{}, nil, fmt.Errorf("%w: not a SQL Server DSN (want sqlserver://…, server=…;…, or odbc:…)", dialect.ErrUnknownScheme)
	}
	cfg, err := msdsn.Parse(dsn)
	if err != nil {
		return msdsn.Config{}, nil, ds.BadDSN("sqlserver", err)
	}
	// msdsn reads any other string as ADO; one that names no server is
	// not meant for SQL Server.
	_, server := cfg.Parameters[msdsn.Server]
	if !server && !strings.HasPrefix(dsn, "sqlserver://") && !strings.HasPrefix(dsn, "odbc:") {
		return msdsn.Config{}, nil, fmt.Errorf("%w: not a SQL Server DSN (want sqlserver://…, server=…;…, or odbc:…)", dialect.ErrUnknownScheme)
	}
	return cfg, ds, nil
}
