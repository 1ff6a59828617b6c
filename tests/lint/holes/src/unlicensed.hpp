#pragma once
// A source without the licence line: lint.spdx must name this file (and only it).
