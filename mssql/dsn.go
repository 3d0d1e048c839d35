package mssql

import (
	"errors"
	"fmt"
	"strings"

	"github.com/dbqueue/dbq/dialect"
	"github.com/microsoft/go-mssqldb/msdsn"
)

// parseDSN reads a SQL Server DSN, once, in the forms go-mssqldb takes: a
// sqlserver:// URL, an ADO connection string (server=h;user id=u;
// password=p;database=d — it must name the server, as server, data source,
// address, addr or network address) or the odbc: form. Another string, a
// DSN of another database among them, is dialect.ErrUnknownScheme. The
// error never holds the password: it does not quote a DSN that does not
// parse, where no one can tell what the password is (in
// sqlserver://u:a/b@h the URL's user info ends at the '/').
func parseDSN(dsn string) (msdsn.Config, error) {
	cfg, err := msdsn.Parse(dsn)
	if err != nil {
		return msdsn.Config{}, fmt.Errorf("dbq: bad sqlserver DSN: %w", redactErr(err))
	}
	// msdsn reads any other string as ADO; one that names no server is
	// not meant for SQL Server.
	_, server := cfg.Parameters[msdsn.Server]
	if !server && !strings.HasPrefix(dsn, "sqlserver://") && !strings.HasPrefix(dsn, "odbc:") {
		return msdsn.Config{}, fmt.Errorf("%w: not a SQL Server DSN (want sqlserver://…, server=…;…, or odbc:…)", dialect.ErrUnknownScheme)
	}
	return cfg, nil
}

// redactErr returns err, or when its text holds a password dialect.Redact
// finds (a driver error may quote the DSN), an error of the redacted text.
func redactErr(err error) error {
	if r := dialect.Redact(err.Error()); r != err.Error() {
		return errors.New(r)
	}
	return err
}
