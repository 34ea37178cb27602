// session_stream.h — a CUDA stream no other live session uses. A session's work, and the CUDA
// graphs it captures, run there: another session's kernels on the same stream would be
// recorded into a graph being captured, or wait behind it. torch's pool has 32 streams per
// device, handed out in turn; a session takes one no live session holds, else a stream of
// its own, destroyed with it.
#pragma once

#include <c10/core/Device.h>
#include <c10/core/Stream.h>

namespace gpt {

class SessionStream {
public:
    explicit SessionStream(c10::Device device);  // a CUDA device
    ~SessionStream();
    SessionStream(const SessionStream &) = delete;
    SessionStream &operator=(const SessionStream &) = delete;

    c10::Stream get() const { return stream_; }

private:
    c10::Stream stream_;
    bool created_ = false;  // made for this session when every pool stream was held
};

}  // namespace gpt
