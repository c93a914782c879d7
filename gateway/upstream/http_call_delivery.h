#pragma once

// How both engines of HttpUpstreamClient (http_client.h) hand a call's recorded answer to
// its user. The engines' handlers only record (status, headers, body bytes, streamed
// pieces, the outcome) and queue the call as news; these run the user's callbacks after,
// when no engine state is half-changed, so a callback may send, cancel any call or destroy
// the client.
//
// A Call here has: owner (null once ended), callbacks, streaming, head_complete,
// head_delivered, status, headers, pieces, finished, outcome, body, body_used, queued.
// Loop thread only.

#include <memory>
#include <utility>
#include <vector>

#include "codecs/buffer.h"
#include "codecs/status.h"
#include "gateway/upstream/http_client.h"

namespace infergate::gateway::upstream::http_client_detail {

// Runs what `call` has for its user, in order on_head, on_data..., on_complete (the last
// only once finished; the call then leaves `calls`, the engine's map from Call* to the
// owning pointer). False when a callback destroyed the client: nothing of it may be touched.
template <class Call, class Calls>
bool deliverCall(Call& call, Calls& calls, const bool& destroyed) {
  if (call.owner == nullptr) return true;  // cancelled since it was queued
  // Run from a local: a callback may cancel this call or destroy the client, which clears
  // call.callbacks; the function being run must outlive its own execution.
  HttpUpstreamCallbacks cb = std::move(call.callbacks);
  call.callbacks = {};
  auto stopped = [&] { return destroyed || call.owner == nullptr; };
  // A relay not begun (HttpUpstreamCallbacks::relay) is buffered: not streaming.
  if (call.streaming && (cb.on_head || cb.relay)) {
    if (call.head_complete && !call.head_delivered) {
      call.head_delivered = true;
      if (cb.relay) {
        cb.relay->onHead(call.status, call.headers, *call.content_length);  // a relay is sized
      } else {
        cb.on_head(call.status, call.headers);
      }
      if (stopped()) return !destroyed;
    }
    while (!call.pieces.empty()) {
      std::vector<codecs::Buffer> pieces;
      pieces.swap(call.pieces);
      for (codecs::Buffer& piece : pieces) {
        if (cb.relay) {
          cb.relay->onPiece(std::move(piece));
        } else if (cb.on_data) {
          cb.on_data(std::move(piece));
        }
        if (stopped()) return !destroyed;
      }
    }
  }
  if (!call.finished) {
    call.callbacks = std::move(cb);
    return true;
  }
  codecs::StatusOr<HttpUpstreamResponse> result(HttpUpstreamResponse{});
  if (call.outcome.ok()) {
    result->status = call.status;
    result->headers = std::move(call.headers);
    if (!call.streaming) result->body = std::move(call.body).freeze(call.body_used);
  } else {
    result = std::move(call.outcome);
  }
  call.owner = nullptr;
  auto keep = calls.extract(&call);  // the caller's batch still holds the Call
  if (cb.on_complete) cb.on_complete(std::move(result));
  return !destroyed;
}

// Delivers every call in `news` (swapped out first: callbacks may queue more). While it
// runs, `destroyed_slot` points at a flag the engine's destructor sets; nested deliveries
// chain their flags so that every level learns of it.
template <class Call, class Calls>
void deliverNews(std::vector<std::shared_ptr<Call>>& news, Calls& calls, bool*& destroyed_slot) {
  if (news.empty()) return;
  std::vector<std::shared_ptr<Call>> batch;
  batch.swap(news);
  bool destroyed = false;
  bool* outer = destroyed_slot;
  destroyed_slot = &destroyed;
  for (const std::shared_ptr<Call>& call : batch) {
    call->queued = false;
    if (!deliverCall(*call, calls, destroyed)) {
      if (outer != nullptr) *outer = true;
      return;  // the engine is gone; `batch` only releases Calls
    }
  }
  // The batch's storage becomes the next one's (no allocation per delivery): released
  // first, still watched, as releasing a Call may end the engine.
  batch.clear();
  if (destroyed) {
    if (outer != nullptr) *outer = true;
    return;
  }
  destroyed_slot = outer;
  if (news.empty()) news.swap(batch);
}

}  // namespace infergate::gateway::upstream::http_client_detail
