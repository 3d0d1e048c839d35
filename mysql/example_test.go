package mysql_test

import (
	"context"
	"log"

	"github.com/dbqueue/dbq/mysql"
	"github.com/dbqueue/dbq/queue"
)

// Open a queue on MySQL or MariaDB, create its table, enqueue a job and run
// a worker.
func Example() {
	ctx := context.Background()
	q, err := mysql.Open(ctx, "mysql://dbq:secret@127.0.0.1:3306/app", mysql.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer q.Close()
	d := q.Driver().(*mysql.Driver)
	if err := mysql.Migrate(ctx, d.DB(), mysql.Config{}); err != nil {
		log.Fatal(err)
	}
	log.Printf("running on %s", d.Server())
	if _, err := q.Enqueue(ctx, queue.NewJob{Queue: "email", Payload: []byte(`{"to":"a@example.com"}`)}); err != nil {
		log.Fatal(err)
	}
	w, err := queue.NewWorker(q, func(ctx context.Context, j *queue.Job) error {
		log.Printf("job %d: %s", j.ID, j.Payload)
		return nil
	}, queue.WorkerConfig{Queue: "email"})
	if err != nil {
		log.Fatal(err)
	}
	_ = w.Run(ctx) // until ctx is cancelled
}
