// Command a2a-go-client drives an A2A agent with the official A2A Go SDK and prints what
// happened as one JSON object, so a test can assert on it.
//
//	a2a-go-client -base http://127.0.0.1:8080 -token T -text "question" [-scenario all|auth]
//
// Scenario "all": resolve the Agent Card, then with the SDK's AuthInterceptor (which
// attaches the token only for a security requirement the card declares) send a message
// and wait for the task, stream one, send one without blocking and poll it with
// tasks/get. Scenario "auth": a send and a stream with the given (wrong) token; their
// errors are reported.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2aclient"
	"github.com/a2aproject/a2a-go/a2aclient/agentcard"
)

type taskOut struct {
	ID    string `json:"id"`
	State string `json:"state"`
	Text  string `json:"text"`
}

type streamOut struct {
	Events []string `json:"events"`
	Final  string   `json:"final"`
	Text   string   `json:"text"`
}

type report struct {
	Card        *a2a.AgentCard `json:"card,omitempty"`
	Send        *taskOut       `json:"send,omitempty"`
	Stream      *streamOut     `json:"stream,omitempty"`
	Poll        *taskOut       `json:"poll,omitempty"`
	Polls       int            `json:"polls,omitempty"`
	Error       string         `json:"error,omitempty"`
	StreamError string         `json:"streamError,omitempty"`
	ErrorStep   string         `json:"errorStep,omitempty"`
}

func text(task *a2a.Task) string {
	out := ""
	for _, art := range task.Artifacts {
		for _, part := range art.Parts {
			if tp, ok := part.(a2a.TextPart); ok {
				out += tp.Text
			}
		}
	}
	return out
}

func summary(task *a2a.Task) *taskOut {
	return &taskOut{ID: string(task.ID), State: string(task.Status.State), Text: text(task)}
}

func asTask(res a2a.SendMessageResult) (*a2a.Task, error) {
	task, ok := res.(*a2a.Task)
	if !ok {
		return nil, fmt.Errorf("the agent answered with %T, not a task", res)
	}
	return task, nil
}

func run(ctx context.Context, base, token, question, scenario string) (rep report) {
	fail := func(step string, err error) report {
		rep.Error, rep.ErrorStep = err.Error(), step
		return rep
	}
	card, err := agentcard.DefaultResolver.Resolve(ctx, base)
	if err != nil {
		return fail("card", err)
	}
	rep.Card = card
	creds := a2aclient.NewInMemoryCredentialsStore()
	session := a2aclient.SessionID("swarmkit-test")
	for _, requirement := range card.Security {
		for scheme := range requirement {
			creds.Set(session, scheme, a2aclient.AuthCredential(token))
		}
	}
	ctx = a2aclient.WithSessionID(ctx, session)
	client, err := a2aclient.NewFromCard(
		ctx, card, a2aclient.WithInterceptors(&a2aclient.AuthInterceptor{Service: creds}),
	)
	if err != nil {
		return fail("client", err)
	}
	defer func() { _ = client.Destroy() }()

	msg := func() *a2a.MessageSendParams {
		return &a2a.MessageSendParams{
			Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.TextPart{Text: question}),
		}
	}
	res, err := client.SendMessage(ctx, msg())
	if err != nil && scenario == "auth" {
		// The same refusal on the streaming path (a separate code path in the SDK).
		for _, serr := range client.SendStreamingMessage(ctx, msg()) {
			if serr != nil {
				rep.StreamError = serr.Error()
				break
			}
		}
	}
	if err != nil {
		return fail("send", err)
	}
	task, err := asTask(res)
	if err != nil {
		return fail("send", err)
	}
	rep.Send = summary(task)
	if scenario == "auth" {
		return rep
	}

	stream := &streamOut{}
	for event, err := range client.SendStreamingMessage(ctx, msg()) {
		if err != nil {
			return fail("stream", err)
		}
		switch ev := event.(type) {
		case *a2a.Task:
			stream.Events = append(stream.Events, "task")
			stream.Final = string(ev.Status.State)
		case *a2a.TaskStatusUpdateEvent:
			stream.Events = append(stream.Events, "status-update")
			stream.Final = string(ev.Status.State)
		case *a2a.TaskArtifactUpdateEvent:
			stream.Events = append(stream.Events, "artifact-update")
			for _, part := range ev.Artifact.Parts {
				if tp, ok := part.(a2a.TextPart); ok {
					stream.Text += tp.Text
				}
			}
		default:
			stream.Events = append(stream.Events, fmt.Sprintf("%T", event))
		}
	}
	rep.Stream = stream

	blocking := false
	params := msg()
	params.Config = &a2a.MessageSendConfig{Blocking: &blocking}
	res, err = client.SendMessage(ctx, params)
	if err != nil {
		return fail("poll-send", err)
	}
	if task, err = asTask(res); err != nil {
		return fail("poll-send", err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for !task.Status.State.Terminal() && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
		rep.Polls++
		if task, err = client.GetTask(ctx, &a2a.TaskQueryParams{ID: task.ID}); err != nil {
			return fail("poll", err)
		}
	}
	rep.Poll = summary(task)
	return rep
}

func main() {
	base := flag.String("base", "", "the agent's base URL (the card is at /.well-known/agent-card.json)")
	token := flag.String("token", "", "the bearer token for the card's security scheme")
	question := flag.String("text", "What is the answer?", "the message text")
	scenario := flag.String("scenario", "all", "all | auth")
	timeout := flag.Duration("timeout", 120*time.Second, "overall deadline")
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	rep := run(ctx, *base, *token, *question, *scenario)
	if err := json.NewEncoder(os.Stdout).Encode(rep); err != nil {
		os.Exit(2)
	}
}
