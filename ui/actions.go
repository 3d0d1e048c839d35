package ui

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
)

// The actions: retry, cancel, pause and resume, each a POST that redirects
// back with a flash message.

// formID returns the job id posted in r, or 0.
func formID(r *http.Request) int64 {
	id, err := strconv.ParseInt(r.PostFormValue("id"), 10, 64)
	if err != nil || id < 1 {
		return 0
	}
	return id
}

// back redirects to the Job page of id, or to the Queues page when id is 0,
// leaving msg to show there.
func (h *handler) back(w http.ResponseWriter, r *http.Request, id int64, msg string) {
	to := "/"
	if id > 0 {
		to = "/jobs/" + strconv.FormatInt(id, 10)
	}
	h.backTo(w, r, to, msg)
}

// backTo redirects to path (under the prefix), leaving msg to show there.
func (h *handler) backTo(w http.ResponseWriter, r *http.Request, path, msg string) {
	h.setFlash(w, r, msg)
	http.Redirect(w, r, h.opts.Prefix+path, http.StatusSeeOther)
}

// retry revives one dead job (id and queue posted) or every dead job of a
// queue (queue alone).
func (h *handler) retry(w http.ResponseWriter, r *http.Request) {
	name, id := r.PostFormValue("queue"), formID(r)
	var ids []int64
	if id > 0 {
		ids = []int64{id}
	} else if r.PostFormValue("id") != "" {
		h.fail(w, r, fmt.Errorf("%w: bad job id", errBadRequest))
		return
	}
	done, err := h.q.RetryDead(r.Context(), name, ids...)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	switch {
	case id > 0 && len(done) == 1:
		h.back(w, r, id, fmt.Sprintf("Job %d is ready to run again.", id))
	case id > 0:
		h.back(w, r, id, fmt.Sprintf("Job %d was not retried: it is not dead in queue %s.", id, name))
	default:
		h.back(w, r, 0, fmt.Sprintf("Queue %s: %d dead jobs are ready to run again.", name, len(done)))
	}
}

func (h *handler) cancel(w http.ResponseWriter, r *http.Request) {
	id := formID(r)
	if id == 0 {
		h.fail(w, r, fmt.Errorf("%w: bad job id", errBadRequest))
		return
	}
	done, err := h.q.Cancel(r.Context(), id)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if len(done) == 0 {
		h.back(w, r, id, fmt.Sprintf("Job %d was not cancelled: a worker holds it, or it is gone.", id))
		return
	}
	h.backTo(w, r, "/jobs?queue="+url.QueryEscape(r.PostFormValue("queue")), fmt.Sprintf("Job %d cancelled (deleted).", id))
}

func (h *handler) pause(paused bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		name := r.PostFormValue("queue")
		var err error
		if paused {
			err = h.q.Pause(r.Context(), name)
		} else {
			err = h.q.Resume(r.Context(), name)
		}
		if err != nil {
			h.fail(w, r, err)
			return
		}
		if paused {
			h.back(w, r, 0, fmt.Sprintf("Queue %s is paused: workers claim none of its jobs.", name))
		} else {
			h.back(w, r, 0, fmt.Sprintf("Queue %s is running again.", name))
		}
	}
}
