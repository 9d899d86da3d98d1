// The whole public API of zaris.
#pragma once

#include "zaris/client.hpp"
#include "zaris/clock.hpp"
#include "zaris/election.hpp"
#include "zaris/janitor.hpp"
#include "zaris/kv.hpp"
#include "zaris/lease.hpp"
#include "zaris/mutex.hpp"
#include "zaris/options.hpp"
#include "zaris/result.hpp"
#include "zaris/session.hpp"
#include "zaris/watch.hpp"
