// HttpUpstreamClient's relay (HttpUpstreamCallbacks::relay): a large sized answer handed on
// as it arrives, from the one buffer it is read into, against real upstreams on loopback
// (raw sockets where the upstream must pause or die mid-answer). Both engines: libcurl
// never relays, and the tests say what it does instead.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gateway/upstream/http_client_native_engine.h"
#include "gateway/upstream/http_client_test_fixture.h"

namespace infergate::gateway::upstream::testing {
namespace {

// ---- relay: a large answer handed on from the buffer it is read into ----

// What one call with a relay saw, in order.
struct RelayRecord {
  std::vector<std::string> events;
  std::vector<Buffer> pieces;
  StatusOr<HttpUpstreamResponse> result = absl::UnknownError("not yet");
  std::string text() const {
    std::string out;
    for (const Buffer& p : pieces) out += p.view();
    return out;
  }
};

// An AnswerRelay that records what it is told into a RelayRecord (client loop only).
class RecordingRelay final : public AnswerRelay {
 public:
  RecordingRelay(RelayRecord& record, std::function<void()> on_first_piece)
      : record_(record), on_first_piece_(std::move(on_first_piece)) {}
  void onHead(int status, const http::HeaderList& headers, uint64_t length) override {
    const std::string_view* announced = headers.find("Content-Length");
    record_.events.push_back("head " + std::to_string(status) + " " + std::to_string(length) + " " +
                             std::string(announced ? *announced : ""));
  }
  void onPiece(Buffer piece) override {
    record_.events.push_back("data");
    record_.pieces.push_back(std::move(piece));
    if (record_.pieces.size() == 1 && on_first_piece_) on_first_piece_();
  }

 private:
  RelayRecord& record_;
  std::function<void()> on_first_piece_;
};

// Sends `request` with a relay; `on_first_piece` runs on the client's loop when the first
// piece arrives. Waits for on_complete.
RelayRecord relay(LoopThread& thread, HttpUpstreamClient& client,
                  const config::ListenAddress& endpoint, HttpUpstreamRequest request,
                  std::function<void()> on_first_piece = nullptr) {
  RelayRecord record;
  std::promise<void> complete;
  thread.run([&] {
    HttpUpstreamCallbacks callbacks;
    callbacks.relay = std::make_shared<RecordingRelay>(record, on_first_piece);
    callbacks.on_complete = [&](StatusOr<HttpUpstreamResponse> r) {
      record.events.push_back("complete");
      record.result = std::move(r);
      complete.set_value();
    };
    client.send(endpoint, std::move(request), std::move(callbacks));
  });
  EXPECT_EQ(complete.get_future().wait_for(kWait), std::future_status::ready);
  return record;
}

// An upstream answering one request 200 with `body` 64 KiB at a time, with a Content-Length
// or as chunks (an event stream's type); `written` counts the body's bytes sent so far.
std::unique_ptr<RawUpstream> steppedUpstream(const std::string& body, bool chunked, std::atomic<size_t>& written) {
  return std::make_unique<RawUpstream>([&body, chunked, &written](RawUpstream& u) {
    int fd = u.accept();
    ASSERT_GE(fd, 0);
    RawUpstream::readRequest(fd);
    RawUpstream::write(fd, chunked ? std::string("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                                                 "Transfer-Encoding: chunked\r\n\r\n")
                                   : "HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n");
    char size[16];
    for (size_t at = 0; at < body.size(); at += 65536) {
      const size_t n = std::min<size_t>(65536, body.size() - at);
      if (chunked) RawUpstream::write(fd, std::string_view(size, std::snprintf(size, sizeof(size), "%zx\r\n", n)));
      RawUpstream::write(fd, std::string_view(body).substr(at, n));
      if (chunked) RawUpstream::write(fd, "\r\n");
      written = at + n;
    }
    if (chunked) RawUpstream::write(fd, "0\r\n\r\n");
    RawUpstream::drain(fd);
    ::close(fd);
  });
}

// `read()`, run on `thread`'s loop every 50 ms until it is nonzero and the same six times
// running (or 10 s): how far a window lets bytes come.
size_t steadyValue(LoopThread& thread, const std::function<size_t()>& read) {
  size_t value = 0, steady = 0;
  for (int i = 0; i < 200 && steady < 6; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    size_t now = 0;
    thread.run([&] { now = read(); });
    steady = now == value && now > 0 ? steady + 1 : 0;
    value = now;
  }
  return value;
}

std::string patterned(size_t size) {
  std::string body(size, '\0');
  for (size_t i = 0; i < size; ++i) body[i] = static_cast<char>(i % 251);
  return body;
}

TEST_P(HttpClientTest, ARelayGetsALargeSizedBodyAsItComesFromOneBuffer) {
  // The upstream sends the head and a little over one step, then waits until the client
  // has handed on a piece (native) before it sends the rest. libcurl relays nothing: the
  // upstream sends everything at once and the answer comes whole.
  const bool native = GetParam() == HttpClientEngine::kAuto;
  const std::string body = patterned(3 * kRelayStepBytes + 1000);
  const size_t first = kRelayStepBytes + 100;
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  RawUpstream upstream([&](RawUpstream& u) {
    int fd = u.accept();
    ASSERT_GE(fd, 0);
    RawUpstream::readRequest(fd);
    RawUpstream::write(fd, "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: " +
                               std::to_string(body.size()) + "\r\n\r\n" + body.substr(0, first));
    if (native) {
      EXPECT_EQ(released.wait_for(kWait), std::future_status::ready);
    }
    RawUpstream::write(fd, std::string_view(body).substr(first));
    RawUpstream::drain(fd);
    ::close(fd);
  });
  bool released_once = false;
  RelayRecord r = relay(client_thread_, client(), upstream.endpoint(), post("/x", "q"), [&] {
    released_once = true;
    release.set_value();
  });
  client_thread_.run([this] { client_.reset(); });
  ASSERT_TRUE(r.result.ok()) << r.result.status();
  EXPECT_EQ(r.result->status, 200);
  if (!native) {
    EXPECT_EQ(r.events, (std::vector<std::string>{"complete"}));  // buffered, no on_head
    EXPECT_TRUE(r.result->body.view() == body);
    return;
  }
  EXPECT_TRUE(released_once);
  EXPECT_TRUE(r.result->body.empty());
  ASSERT_GE(r.events.size(), 4u);
  EXPECT_EQ(r.events.front(), "head 200 " + std::to_string(body.size()) + " " + std::to_string(body.size()));
  EXPECT_EQ(r.events.back(), "complete");
  EXPECT_TRUE(r.text() == body);
  // The first piece went on before the upstream sent the rest, and every piece but the
  // last is at least a step.
  ASSERT_GE(r.pieces.size(), 2u);
  EXPECT_GE(r.pieces.front().size(), kRelayStepBytes);
  EXPECT_LT(r.pieces.front().size(), body.size());
  for (size_t i = 0; i + 1 < r.pieces.size(); ++i) {
    EXPECT_GE(r.pieces[i].size(), kRelayStepBytes) << "piece " << i;
    // No copy: each piece starts where the one before ended, in the one buffer.
    EXPECT_EQ(r.pieces[i + 1].data(), r.pieces[i].data() + r.pieces[i].size()) << "piece " << i;
  }
}

TEST_P(HttpClientTest, ARelayIsNotUsedForAnAnswerThatCameWithItsHead) {
  RelayRecord r = relay(client_thread_, client(), endpoint_, post("/echo", "small body"));
  ASSERT_TRUE(r.result.ok()) << r.result.status();
  EXPECT_EQ(r.events, (std::vector<std::string>{"complete"}));
  EXPECT_EQ(r.result->body.view(), "small body");
  ASSERT_NE(r.result->headers.find("X-Reply"), nullptr);
}

TEST_P(HttpClientTest, ARelayIsNotUsedForAChunkedAnswer) {
  RelayRecord r = relay(client_thread_, client(), endpoint_, get("/chunks"));
  ASSERT_TRUE(r.result.ok()) << r.result.status();
  EXPECT_EQ(r.events, (std::vector<std::string>{"complete"}));  // no length to relay by
  EXPECT_EQ(r.result->body.size(), 40u * 30000 + 780);
}

TEST_P(HttpClientTest, ARelayCutShortGetsWhatCameThenUnavailable) {
  const bool native = GetParam() == HttpClientEngine::kAuto;
  const std::string body = patterned(4 * kRelayStepBytes);
  const size_t sent = kRelayStepBytes + 5000;
  RawUpstream upstream([&](RawUpstream& u) {
    int fd = u.accept();
    ASSERT_GE(fd, 0);
    RawUpstream::readRequest(fd);
    RawUpstream::write(fd, "HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(body.size()) +
                               "\r\n\r\n" + body.substr(0, sent));
    ::close(fd);  // the upstream dies mid-answer
  });
  RelayRecord r = relay(client_thread_, client(), upstream.endpoint(), post("/x", "q"));
  client_thread_.run([this] { client_.reset(); });
  ASSERT_FALSE(r.result.ok());
  EXPECT_EQ(r.result.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(std::string(r.result.status().message()).find("triton-a"), std::string::npos)
      << r.result.status();
  if (!native) {
    EXPECT_EQ(r.events, (std::vector<std::string>{"complete"}));
    return;
  }
  // The head and everything that came went on (the part of a step too), then the error.
  ASSERT_GE(r.events.size(), 3u);
  EXPECT_EQ(r.events.front(), "head 200 " + std::to_string(body.size()) + " " + std::to_string(body.size()));
  EXPECT_EQ(r.events.back(), "complete");
  const std::string got = r.text();
  EXPECT_EQ(got.size(), sent);
  EXPECT_TRUE(got == body.substr(0, sent));
}

TEST_P(HttpClientTest, ARelayTakingBlocksIsHandedNoMoreThanItsWindowUntilItLetsGo) {
  // A body far larger than the window and what the sockets' buffers may hold between the
  // two ends (net.ipv4.tcp_rmem's largest is 32 MiB on some machines). While the relay keeps its pieces, the native engine reads only a window's worth
  // and leaves the rest on the upstream, which cannot send it all; once the relay lets go,
  // the rest arrives whole and in order. libcurl buffers the answer whole.
  const bool native = GetParam() == HttpClientEngine::kAuto;
  const std::string body = patterned(96 * 1024 * 1024);
  std::atomic<size_t> written{0};
  auto upstream = steppedUpstream(body, /*chunked=*/false, written);
  auto relay = std::make_shared<KeepingRelay>();
  StatusOr<HttpUpstreamResponse> result = absl::UnknownError("not yet");
  std::future<void> done = sendRelayed(client_thread_, client(), upstream->endpoint(), post("/x", "q"), relay, &result);
  if (native) {
    const size_t held = steadyValue(client_thread_, [&] { return relay->held_bytes; });
    EXPECT_EQ(held, kRelayWindowBytes);  // whole steps up to the window, and no more
    EXPECT_NE(done.wait_for(std::chrono::milliseconds(0)), std::future_status::ready);
    EXPECT_LT(written.load(), body.size()) << "the upstream was read ahead of the relay";
    client_thread_.run([&] { relay->letGo(); });
  }
  ASSERT_EQ(done.wait_for(kWait), std::future_status::ready);
  client_thread_.run([this] { client_.reset(); });
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->status, 200);
  if (!native) {
    EXPECT_EQ(relay->heads, 0);
    EXPECT_TRUE(result->body.view() == body);
    return;
  }
  EXPECT_EQ(relay->heads, 1);
  EXPECT_TRUE(result->body.empty());
  EXPECT_LE(relay->largest_piece, kRelayBlockBytes);  // a block each
  EXPECT_EQ(relay->text.size(), body.size());
  EXPECT_TRUE(relay->text == body);
}

TEST_P(HttpClientTest, WindowedStreamingPiecesHoldTheUpstreamBackWhileTheCallerKeepsThem) {
  // A chunked answer (as generate_stream's events come) far larger than the window, to a
  // caller that keeps its pieces (windowed_data): the native engine reads about a window's
  // worth, the upstream cannot send the rest; once the caller lets go, the rest arrives
  // whole and in order. libcurl hands its pieces on as they come.
  const bool native = GetParam() == HttpClientEngine::kAuto;
  const std::string body = patterned(96 * 1024 * 1024);
  std::atomic<size_t> written{0};
  auto upstream = steppedUpstream(body, /*chunked=*/true, written);
  // Client loop only.
  std::vector<Buffer> kept;
  size_t kept_bytes = 0;
  bool keeping = true;
  std::string text;
  std::promise<void> complete;
  StatusOr<HttpUpstreamResponse> result = absl::UnknownError("not yet");
  client_thread_.run([&] {
    HttpUpstreamCallbacks callbacks;
    callbacks.windowed_data = true;
    callbacks.on_head = [](int, const http::HeaderList&) {};
    callbacks.on_data = [&](Buffer piece) {
      text += piece.view();
      if (!keeping) return;
      kept_bytes += piece.size();
      kept.push_back(std::move(piece));
    };
    callbacks.on_complete = [&](StatusOr<HttpUpstreamResponse> r) {
      result = std::move(r);
      complete.set_value();
    };
    client().send(upstream->endpoint(), post("/x", "q"), std::move(callbacks));
  });
  std::future<void> done = complete.get_future();
  if (native) {
    const size_t held = steadyValue(client_thread_, [&] { return kept_bytes; });
    EXPECT_GE(held, kRelayWindowBytes);
    EXPECT_LE(held, kRelayWindowBytes + native_detail::kReadBufferBytes);  // a read past the window, no more
    EXPECT_NE(done.wait_for(std::chrono::milliseconds(0)), std::future_status::ready);
    EXPECT_LT(written.load(), body.size()) << "the upstream was read ahead of the caller";
    client_thread_.run([&] {
      keeping = false;
      kept.clear();  // let go: reading resumes
    });
  }
  ASSERT_EQ(done.wait_for(kWait), std::future_status::ready);
  client_thread_.run([&] {
    kept.clear();
    client_.reset();
  });
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->status, 200);
  EXPECT_EQ(text.size(), body.size());
  EXPECT_TRUE(text == body);
}

TEST_P(HttpClientTest, ARelayTakingBlocksCutShortGetsWhatCameThenUnavailable) {
  // The upstream dies part-way into a block: the filled part of it goes on before the error.
  const bool native = GetParam() == HttpClientEngine::kAuto;
  const std::string body = patterned(kRelayBlockBytes + 4 * kRelayStepBytes);
  const size_t sent = kRelayBlockBytes + 2 * kRelayStepBytes + 5000;
  RawUpstream upstream([&](RawUpstream& u) {
    int fd = u.accept();
    ASSERT_GE(fd, 0);
    RawUpstream::readRequest(fd);
    RawUpstream::write(fd, "HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" +
                               body.substr(0, sent));
    ::close(fd);
  });
  auto relay = std::make_shared<KeepingRelay>();
  relay->letGo();  // nothing sent yet: every piece is read as it comes
  StatusOr<HttpUpstreamResponse> result = absl::UnknownError("not yet");
  std::future<void> done = sendRelayed(client_thread_, client(), upstream.endpoint(), post("/x", "q"), relay, &result);
  ASSERT_EQ(done.wait_for(kWait), std::future_status::ready);
  client_thread_.run([this] { client_.reset(); });
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), absl::StatusCode::kUnavailable) << result.status();
  if (!native) return;
  EXPECT_EQ(relay->heads, 1);
  EXPECT_EQ(relay->text.size(), sent);
  EXPECT_TRUE(relay->text == body.substr(0, sent));
}

}  // namespace
}  // namespace infergate::gateway::upstream::testing
