#include "codecs/compression.h"

#include <zlib.h>

#include <algorithm>
#include <charconv>
#include <string>

#include "codecs/text.h"

namespace infergate::codecs {
namespace {

constexpr int kGzipWindow = 15 + 16;   // write a gzip wrapper
constexpr int kZlibWindow = 15;        // write a zlib wrapper
constexpr int kAutoDetectWindow = 15 + 32;

std::string_view trim(std::string_view s) { return trimAscii(s); }

// q-value of one Accept-Encoding element ("gzip;q=0.5"), 1 when absent, -1 when malformed.
double qValue(std::string_view params) {
  for (std::string_view p : splitOn(params, ';')) {
    p = trim(p);
    if (p.size() > 2 && (p[0] == 'q' || p[0] == 'Q') && p[1] == '=') {
      std::string digits(trim(p.substr(2)));
      char* end = nullptr;
      double q = std::strtod(digits.c_str(), &end);
      if (end == digits.c_str()) return -1;
      return q;
    }
  }
  return 1;
}

class ZStream {
 public:
  ~ZStream() {
    if (inflating_) inflateEnd(&z_);
    if (deflating_) deflateEnd(&z_);
  }
  z_stream* get() { return &z_; }
  bool initInflate() { return inflating_ = inflateInit2(&z_, kAutoDetectWindow) == Z_OK; }
  bool initDeflate(int window, int level) {
    return deflating_ = deflateInit2(&z_, level, Z_DEFLATED, window, 8, Z_DEFAULT_STRATEGY) == Z_OK;
  }

 private:
  z_stream z_{};
  bool inflating_ = false;
  bool deflating_ = false;
};

}  // namespace

std::string_view contentEncodingName(ContentEncoding encoding) {
  switch (encoding) {
    case ContentEncoding::kGzip:
      return "gzip";
    case ContentEncoding::kDeflate:
      return "deflate";
    case ContentEncoding::kIdentity:
      break;
  }
  return "identity";
}

StatusOr<ContentEncoding> parseContentEncoding(std::string_view header) {
  std::string_view v = trim(header);
  if (v.empty() || equalsIgnoreCase(v, "identity")) return ContentEncoding::kIdentity;
  if (equalsIgnoreCase(v, "gzip")) return ContentEncoding::kGzip;
  if (equalsIgnoreCase(v, "deflate")) return ContentEncoding::kDeflate;
  return unimplemented("unsupported Content-Encoding '", v, "'; supported: gzip, deflate");
}

ContentEncoding negotiateAcceptEncoding(std::string_view header) {
  ContentEncoding best = ContentEncoding::kIdentity;
  double best_q = 0;
  for (std::string_view element : splitOn(header, ',')) {
    element = trim(element);
    size_t semi = element.find(';');
    std::string_view name = trim(element.substr(0, semi));
    double q = semi == std::string_view::npos ? 1 : qValue(element.substr(semi + 1));
    std::optional<ContentEncoding> encoding;
    if (equalsIgnoreCase(name, "gzip")) encoding = ContentEncoding::kGzip;
    if (equalsIgnoreCase(name, "deflate")) encoding = ContentEncoding::kDeflate;
    if (equalsIgnoreCase(name, "identity")) encoding = ContentEncoding::kIdentity;
    if (!encoding || q <= 0) continue;
    if (q > best_q) {
      best_q = q;
      best = *encoding;
    }
  }
  return best;
}

StatusOr<Buffer> decompress(ContentEncoding encoding, const BufferChain& body,
                            uint64_t max_size) {
  if (encoding == ContentEncoding::kIdentity) return body.flatten();
  ZStream z;
  if (!z.initInflate()) return internalError("zlib inflateInit2 failed");
  std::string out;
  out.resize(std::min<uint64_t>(std::max<size_t>(body.size() * 4, 4096), max_size + 1));
  size_t produced = 0;
  int rc = Z_OK;
  const auto& segments = body.segments();
  size_t segment = 0;
  z.get()->avail_in = 0;
  while (true) {
    if (z.get()->avail_in == 0 && segment < segments.size()) {
      z.get()->next_in = const_cast<Bytef*>(segments[segment].data());
      z.get()->avail_in = static_cast<uInt>(segments[segment].size());
      ++segment;
    }
    if (produced == out.size()) {
      if (produced > max_size) break;
      out.resize(std::min<uint64_t>(out.size() * 2, max_size + 1));
    }
    z.get()->next_out = reinterpret_cast<Bytef*>(out.data() + produced);
    z.get()->avail_out = static_cast<uInt>(std::min<size_t>(out.size() - produced, 1u << 30));
    size_t before = z.get()->avail_out;
    rc = inflate(z.get(), Z_NO_FLUSH);
    produced += before - z.get()->avail_out;
    if (produced > max_size) {
      return resourceExhausted("decompressed body exceeds the limit of ", max_size, " bytes");
    }
    if (rc == Z_STREAM_END) break;
    if (rc == Z_BUF_ERROR && z.get()->avail_in == 0 && segment == segments.size()) {
      return invalidArgument(contentEncodingName(encoding), " body is truncated");
    }
    if (rc != Z_OK && rc != Z_BUF_ERROR) {
      return invalidArgument("failed to decompress the ", contentEncodingName(encoding),
                             " body: ", z.get()->msg ? z.get()->msg : "corrupt data");
    }
  }
  if (z.get()->avail_in != 0 || segment != segments.size()) {
    return invalidArgument("unexpected data after the end of the ",
                           contentEncodingName(encoding), " stream");
  }
  out.resize(produced);
  return Buffer::fromString(std::move(out));
}

StatusOr<Buffer> compress(ContentEncoding encoding, const BufferChain& body, int level) {
  if (encoding == ContentEncoding::kIdentity) return body.flatten();
  ZStream z;
  int window = encoding == ContentEncoding::kGzip ? kGzipWindow : kZlibWindow;
  if (!z.initDeflate(window, level)) return internalError("zlib deflateInit2 failed");
  std::string out;
  out.resize(deflateBound(z.get(), body.size()) + 64);
  z.get()->next_out = reinterpret_cast<Bytef*>(out.data());
  z.get()->avail_out = static_cast<uInt>(out.size());
  const auto& segments = body.segments();
  for (size_t i = 0; i < segments.size(); ++i) {
    z.get()->next_in = const_cast<Bytef*>(segments[i].data());
    z.get()->avail_in = static_cast<uInt>(segments[i].size());
    int flush = i + 1 == segments.size() ? Z_FINISH : Z_NO_FLUSH;
    int rc = deflate(z.get(), flush);
    if (rc != Z_OK && rc != Z_STREAM_END) return internalError("zlib deflate failed: ", rc);
  }
  if (segments.empty()) {
    if (deflate(z.get(), Z_FINISH) != Z_STREAM_END) return internalError("zlib deflate failed");
  }
  out.resize(z.get()->total_out);
  return Buffer::fromString(std::move(out));
}

}  // namespace infergate::codecs
