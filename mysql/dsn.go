package mysql

import (
	"fmt"
	"strings"
	"time"

	"github.com/dbqueue/dbq/dialect"
	"github.com/dbqueue/dbq/queue"
	mysqldrv "github.com/go-sql-driver/mysql"
)

// driverConfig parses either DSN form and sets the dialect's options.
func driverConfig(dsn string) (*mysqldrv.Config, error) {
	form := dsn
	if strings.HasPrefix(strings.ToLower(dsn), "mysql://") {
		p, err := dialect.ParseDSN(dsn)
		if err != nil {
			return nil, err
		}
		form = p.Driver
	}
	mc, err := mysqldrv.ParseDSN(form)
	if err != nil {
		// The driver's message quotes no DSN, but be sure.
		return nil, fmt.Errorf("%w: mysql: bad DSN %s: %s", queue.ErrInvalidConfig, dialect.Redact(dsn), dialect.Redact(err.Error()))
	}
	mc.ParseTime = true
	mc.Loc = time.UTC
	mc.RejectReadOnly = true
	mc.InterpolateParams = true
	if mc.Params == nil {
		mc.Params = map[string]string{}
	}
	return mc, nil
}
