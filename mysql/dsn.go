package mysql

import (
	"cmp"
	"errors"
	"net/url"
	"strings"
	"time"

	"github.com/dbqueue/dbq/dialect"
	mysqldrv "github.com/go-sql-driver/mysql"
)

// driverConfig parses a DSN in either form Open takes — the CLI's
// mysql://user:pass@host:3306/db?params (mariadb:// likewise) or the
// driver's own user:pass@tcp(host:3306)/db?params — once, and sets the
// dialect's options. It also returns the DSN as dialect.NewDSN reads it,
// to build messages from. Its errors are *dialect.DSNError
// (queue.ErrInvalidConfig) and never hold the password.
func driverConfig(dsn string) (*mysqldrv.Config, *dialect.DSN, error) {
	ds, err := dialect.NewDSN(dsn)
	if err != nil {
		return nil, nil, err
	}
	form, err := driverForm(dsn)
	if err != nil {
		return nil, nil, ds.BadDSN("mysql", err)
	}
	mc, err := mysqldrv.ParseDSN(form)
	if err != nil {
		return nil, nil, ds.BadDSN("mysql", err)
	}
	mc.ParseTime = true
	mc.Loc = time.UTC
	mc.RejectReadOnly = true
	mc.InterpolateParams = true
	if mc.Params == nil {
		mc.Params = map[string]string{}
	}
	return mc, ds, nil
}

// driverForm returns s in the go-sql-driver/mysql form: a
// mysql://user:pass@host:port/db?opts URL (or mariadb://) becomes
// user:pass@tcp(host:port)/db?opts, the host 127.0.0.1 and the port 3306
// by default; anything else is taken to be in that form already.
func driverForm(s string) (string, error) {
	l := strings.ToLower(s)
	if !strings.HasPrefix(l, "mysql://") && !strings.HasPrefix(l, "mariadb://") {
		return s, nil
	}
	u, err := url.Parse(s)
	if err != nil {
		return "", errors.New("not a valid URL")
	}
	user := ""
	if u.User != nil {
		user = u.User.Username()
		if p, ok := u.User.Password(); ok {
			user += ":" + p
		}
		user += "@"
	}
	host := cmp.Or(u.Host, "127.0.0.1")
	if u.Port() == "" {
		host += ":3306"
	}
	query := ""
	if u.RawQuery != "" {
		query = "?" + u.RawQuery
	}
	return user + "tcp(" + host + ")/" + strings.TrimPrefix(u.Path, "/") + query, nil
}
